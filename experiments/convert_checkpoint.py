# `xlnet-convert` from a checkout, with the same flags: its usage (--help) and code are
# xlnet_tf2/commands/convert_checkpoint.py's.
from xlnet_tf2.commands.convert_checkpoint import main

if __name__ == "__main__":
    main()
