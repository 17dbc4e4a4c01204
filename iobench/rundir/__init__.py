"""The run directory's typed format: trial and sample rows, meta.json with its history, and the folder that holds them."""
