"""Tasks: what one kind of run trains (pretraining, classification and regression, SQuAD,
RACE). A task builds its model, its inputs and its loss; the training loop
(xlnet_tf2/training/trainer.py) only runs it. See docs/ARCHITECTURE.md."""
