import json
import os
import urllib.request


def test_the_server_answers():
    url = os.environ["PRGATE_SERVER_URL"]
    assert urllib.request.urlopen(url + "/health", timeout=10).status == 200
    request = urllib.request.Request(
        url + "/v1/completions",
        data=json.dumps({"model": "default", "prompt": "Hello", "max_tokens": 4}).encode(),
        headers={"Content-Type": "application/json"},
    )
    body = json.load(urllib.request.urlopen(request, timeout=10))
    assert body["choices"][0]["text"]
