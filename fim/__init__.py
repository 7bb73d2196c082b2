"""Fill-in-the-middle generation: models, prompt templates, decoding, the CLI and evaluation."""
