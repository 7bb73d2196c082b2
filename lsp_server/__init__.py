"""The Seam language server (pygls): inline completions that always parse."""
