"""SavedModel export for TF Serving with in-graph tokenization."""
