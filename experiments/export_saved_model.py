# `xlnet-export` from a checkout, with the same flags: its usage (--help) and code are
# xlnet_tf2/commands/export_saved_model.py's.
from xlnet_tf2.commands.export_saved_model import main

if __name__ == "__main__":
    main()
