def k1(x):
    return x
