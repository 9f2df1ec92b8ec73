"""The base floor's small modules: errors, label names, secret masking, stop signals, path checks,
whether the Hugging Face Hub answers, and handing memory back."""
