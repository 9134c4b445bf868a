"""Helpers for the hostile API tests: a body streamed by hand onto a raw socket, and a big tokenizer."""

from __future__ import annotations

import json
import select
import socket


def tokenizer_json(seed: str, size: int) -> bytes:
    """A WordLevel tokenizer.json of about ``size`` bytes (24 bytes a token)."""
    count = size // 24
    vocab = {f"{seed}{n:012d}": n for n in range(count)}
    return json.dumps({"version": "1.0", "added_tokens": [], "normalizer": None, "pre_tokenizer": None,
                       "model": {"type": "WordLevel", "vocab": vocab, "unk_token": f"{seed}000000000000"}}).encode()


def stream_post(port: int, path: str, *, total: int, headers: dict[str, str], chunked: bool) -> tuple[bytes, int]:
    """POST ``total`` bytes chunked until the server answers, or only the headers declaring ``total`` bytes
    (the answer must come before any of the body); (answer, body bytes sent).

    The answer is b"" when the server's hang-up reset the connection before it could be read (the
    kernel drops what was received when a reset follows: the server closed with our bytes unread).
    """
    sock = socket.create_connection(("127.0.0.1", port), timeout=30)
    framing = "Transfer-Encoding: chunked" if chunked else f"Content-Length: {total}"
    head = "".join(f"{k}: {v}\r\n" for k, v in headers.items())
    sock.sendall(f"POST {path} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n{head}{framing}\r\n\r\n".encode())
    piece = b"[" * 65536
    frame = (b"%x\r\n" % len(piece)) + piece + b"\r\n" if chunked else piece
    sent, answer = 0, b""
    try:
        while sent < total and chunked:  # a declared length is answered before any of the body is sent
            if select.select([sock], [], [], 0)[0]:  # the server has answered (or hung up): stop sending
                break
            sock.sendall(frame)
            sent += len(piece)
        sock.settimeout(30)
        while True:  # the server closes the connection after its answer
            more = sock.recv(65536)
            if not more:
                break
            answer += more
    except (BrokenPipeError, ConnectionResetError):
        pass
    finally:
        sock.close()
    return answer, sent
