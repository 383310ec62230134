"""Training of image models: the shared engine, losses, schedules and method recipes."""
