# `xlnet-pretrain` from a checkout, with the same flags: its usage (--help) and code are
# xlnet_tf2/commands/run_pretrain.py's.
from xlnet_tf2.commands.run_pretrain import main

if __name__ == "__main__":
    main()
