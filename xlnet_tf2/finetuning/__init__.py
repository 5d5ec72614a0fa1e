"""Fine-tuning: task data readers, features, task models and losses, metrics, the driver."""
