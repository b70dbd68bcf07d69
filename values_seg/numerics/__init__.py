"""The numerical conventions of samples and maps: boundary checks, the label rule, the stored dtype, the compiled kernels."""
