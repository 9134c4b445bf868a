"""What users touch: the CLI, the API, the pages, the daemon, status and logs."""
