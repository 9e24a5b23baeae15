"""The book's published digits that more than one test file checks."""

MHA_OUT = [  # MultiHeadAttention(3, 2, 6, 0.0, num_heads=2), seed 123, each batch entry
    [0.3190, 0.4858],
    [0.2943, 0.3897],
    [0.2856, 0.3593],
    [0.2693, 0.3873],
    [0.2639, 0.3928],
    [0.2575, 0.4028],
]
