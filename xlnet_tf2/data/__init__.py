"""The prepared pretraining data on disk and the online input pipelines.

On disk: records.py (feature names, file names, TFRecord (de)serialization), params.py (what
an example looks like), manifest.py (`record_info.json`), integrity.py (file sizes, CRCs,
misplaced records). Online: pretrain_dataset.py (prepared directories -> per-replica batches),
objective_sampling.py (the objective's draws: span targets, and factorization orders, also
drawn online; the masks built from them inside the step are tasks/objective.py's),
finetune_batches.py (fine-tuning batches as a function of the step). The offline stage that writes the files is xlnet_tf2/prep. See
docs/DATA.md.
"""
