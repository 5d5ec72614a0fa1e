"""The project's commands, one module each: its flags (from the command's configuration tree)
and `main()`, the entry point of its console script (pyproject.toml's [project.scripts]) and of
the script file that runs it from a checkout:

    xlnet-create-tfrecords      data_prep/create_tfrecords.py      create_tfrecords.py
    xlnet-train-sentencepiece   data_prep/train_sentencepiece.py   train_sentencepiece.py
    xlnet-build-corpus          data_prep/build_corpus.py          build_corpus.py
    xlnet-pretrain              experiments/run_pretrain.py        run_pretrain.py
    xlnet-classify              experiments/run_classifier.py      run_classifier.py
    xlnet-squad                 experiments/run_squad.py           run_squad.py
    xlnet-race                  experiments/run_race.py            run_race.py
    xlnet-tag                   experiments/run_tagger.py          run_tagger.py
    xlnet-convert               experiments/convert_checkpoint.py  convert_checkpoint.py
    xlnet-export                experiments/export_saved_model.py  export_saved_model.py
    xlnet-extract-features      experiments/extract_features.py    extract_features.py

A command module is a program: importing it silences TensorFlow's start-up
(`cli.quiet_startup`, before anything imports TensorFlow) and defines its flags in absl's
global FLAGS, so a process imports one of them. Everything that needs TensorFlow is imported
inside `run`, after the flags were parsed: `--help` and a bad flag never start TensorFlow.
The commands themselves hold no logic worth testing; they parse their flags into a
configuration tree and call the library.
"""
