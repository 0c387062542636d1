"""Ray actor shells; the logic they host lives in plain classes elsewhere."""
