# `xlnet-build-corpus` from a checkout, with the same flags: its usage (--help) and code are
# xlnet_tf2/commands/build_corpus.py's.
from xlnet_tf2.commands.build_corpus import main

if __name__ == "__main__":
    main()
