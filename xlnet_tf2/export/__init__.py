"""SavedModel export for TF Serving with in-graph tokenization (saved_model.py), and the
features of a text file (feature_files.py); the commands' settings are export_config.py's."""
