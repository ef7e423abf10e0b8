def test_dispatch():
    assert True
