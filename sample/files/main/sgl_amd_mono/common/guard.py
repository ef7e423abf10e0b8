def guard(kernel):
    return kernel is not None
