"""Getting conversations into the log: message preparation and input file formats."""
