"""Python lexical layer: lexemes, the branching lexer, right-context lexing and layout guessing."""
