"""What the kit's views answer, before a framework turns it into a response: JSON errors
({"error": "..."}) that say what a caller needs and nothing internal."""
import json


class Answer:
    def __init__(self, status, body=b"", content_type="application/json", sockets=None):
        self.status, self.body, self.content_type = status, body, content_type
        self.sockets = sockets  # a push's X-Roomgate-Sockets


def json_answer(status, value):
    return Answer(status, json.dumps(value).encode())


def error(status, message):
    return json_answer(status, {"error": message})


NO_CONTENT = Answer(204)
