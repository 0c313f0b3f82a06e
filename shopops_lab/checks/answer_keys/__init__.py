"""The answer keys: each quiz's right option, the knowledge checks' keys and the model answers,
read only through `checks.answers` (see there why this folder stands apart)."""
