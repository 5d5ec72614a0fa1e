# `xlnet-create-tfrecords` from a checkout, with the same flags: its usage (--help) and code are
# xlnet_tf2/commands/create_tfrecords.py's.
from xlnet_tf2.commands.create_tfrecords import main

if __name__ == "__main__":
    main()
