"""Published numbers the recipes print beside ours (transcribed from the papers)."""
