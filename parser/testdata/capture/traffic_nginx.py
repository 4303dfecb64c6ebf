import socket, sys, time
port = int(sys.argv[1])
def raw(data, read=True):
    s = socket.create_connection(("127.0.0.1", port))
    s.sendall(data)
    if read:
        try:
            s.settimeout(2)
            while s.recv(65536): pass
        except Exception: pass
    s.close()
    time.sleep(0.05)
reqs = [
 b"GET / HTTP/1.1\r\nHost: www.example.com\r\nUser-Agent: curl/7.88.1\r\nConnection: close\r\n\r\n",
 b"GET /pricing?plan=pro&x=1 HTTP/1.1\r\nHost: www.example.com\r\nReferer: https://www.example.com/\r\nUser-Agent: Mozilla/5.0 (X11; Linux x86_64; rv:120.0) Gecko/20100101 Firefox/120.0\r\nX-Forwarded-For: 203.0.113.7, 10.0.0.2\r\nConnection: close\r\n\r\n",
 b"HEAD /head HTTP/1.0\r\n\r\n",
 b"GET /http10 HTTP/1.0\r\nUser-Agent: Wget/1.21\r\n\r\n",
 b"POST /api/events HTTP/1.1\r\nHost: x\r\nContent-Length: 3\r\nAuthorization: Basic ZnJhbms6c2VjcmV0\r\nConnection: close\r\n\r\nabc",
 b"GET /with space/and \"quotes\" HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n",
 b"GET /bad\xff\xfeutf8/caf\xc3\xa9 HTTP/1.1\r\nHost: x\r\nUser-Agent: ua \"quoted\" \\back\\slash \xc3\xa9\r\nReferer: http://r/\"x\"\r\nConnection: close\r\n\r\n",
 b"\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03" + bytes(range(32)) + b"\r\n\r\n",
 b"GET /app/proxied?q=1 HTTP/1.1\r\nHost: x\r\nX-Forwarded-For: 198.51.100.1\r\nConnection: close\r\n\r\n",
 b"GET /down/dead HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n",
 b"GET http://www.example.com/absolute?x=y HTTP/1.1\r\nHost: www.example.com\r\nConnection: close\r\n\r\n",
 b"BREW /pot HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n",
 b"GET /nohttp\r\n",
 b"GET /partial HTTP/1.1\r\nHost: x\r\n",  # cut short: closed before the headers end
 b"garbage line\r\n\r\n",
 b"GET /tab\there HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n",
 b"GET /" + b"a"*300 + b" HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n",
 b"OPTIONS * HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n",
 b"GET /ctl\x01\x7f HTTP/1.1\r\nHost: x\r\nUser-Agent: \r\nConnection: close\r\n\r\n",
 b"GET / HTTP/2.0\r\nHost: x\r\nConnection: close\r\n\r\n",
]
for r in reqs:
    raw(r, read=not r.endswith(b"Host: x\r\n"))
raw(b"", read=False)  # a connection with nothing sent
