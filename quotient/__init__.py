"""Context-free grammars, the Earley recognizer over NFAs, and left/right quotients."""
