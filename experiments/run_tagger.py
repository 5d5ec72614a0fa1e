# `xlnet-tag` from a checkout, with the same flags: its usage (--help) and code are
# xlnet_tf2/commands/run_tagger.py's.
from xlnet_tf2.commands.run_tagger import main

if __name__ == "__main__":
    main()
