"""Dataset generation: build options, the build pipeline, units, questions and splits."""
