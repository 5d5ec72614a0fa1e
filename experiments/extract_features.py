# `xlnet-extract-features` from a checkout, with the same flags: its usage (--help) and code are
# xlnet_tf2/commands/extract_features.py's.
from xlnet_tf2.commands.extract_features import main

if __name__ == "__main__":
    main()
