# `xlnet-train-sentencepiece` from a checkout, with the same flags: its usage (--help) and code are
# xlnet_tf2/commands/train_sentencepiece.py's.
from xlnet_tf2.commands.train_sentencepiece import main

if __name__ == "__main__":
    main()
