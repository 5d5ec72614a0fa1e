# `xlnet-squad` from a checkout, with the same flags: its usage (--help) and code are
# xlnet_tf2/commands/run_squad.py's.
from xlnet_tf2.commands.run_squad import main

if __name__ == "__main__":
    main()
