def test_k1():
    assert True
