def test_guard():
    assert True
