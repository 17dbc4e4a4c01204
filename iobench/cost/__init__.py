"""What slow starts cost: GPU and storage prices, the idle cost per start, and a strategy's cost over a month."""
