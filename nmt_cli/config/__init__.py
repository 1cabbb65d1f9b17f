"""Recipes: YAML -> typed, validated dataclasses, and the reference of every key."""
