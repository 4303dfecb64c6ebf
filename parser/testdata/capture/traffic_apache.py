import socket, sys, time
port = int(sys.argv[1])
def raw(data):
    s = socket.create_connection(("127.0.0.1", port))
    s.sendall(data)
    try:
        s.settimeout(3)
        while s.recv(65536): pass
    except Exception: pass
    s.close()
    time.sleep(0.05)
C = b"Connection: close\r\n"
reqs = [
 b"GET / HTTP/1.1\r\nHost: www.example.com\r\nUser-Agent: curl/7.88.1\r\n" + C + b"\r\n",
 b"GET /pricing?plan=pro&x=1 HTTP/1.1\r\nHost: www.example.com\r\nReferer: https://www.example.com/\r\nUser-Agent: Mozilla/5.0 (X11; Linux x86_64; rv:120.0) Gecko/20100101 Firefox/120.0\r\nX-Forwarded-For: 203.0.113.7, 10.0.0.2\r\n" + C + b"\r\n",
 b"HEAD /pricing HTTP/1.0\r\n\r\n",
 b"GET /missing HTTP/1.0\r\nUser-Agent: Wget/1.21\r\n\r\n",
 b"GET /private/ HTTP/1.1\r\nHost: www.example.com\r\nAuthorization: Basic ZnJhbms6c2VjcmV0\r\n" + C + b"\r\n",
 b"GET /private/ HTTP/1.1\r\nHost: www.example.com\r\nAuthorization: Basic ZnJhbms6d3Jvbmc=\r\n" + C + b"\r\n",
 b"GET / HTTP/1.1\r\nHost: names.example.com\r\nUser-Agent: lookups on\r\n" + C + b"\r\n",
 b"GET /with space/and \"quotes\" HTTP/1.1\r\nHost: www.example.com\r\n" + C + b"\r\n",
 b"GET /bad\xff\xfeutf8/caf\xc3\xa9 HTTP/1.1\r\nHost: www.example.com\r\nUser-Agent: ua \"quoted\" \\back\\slash \xc3\xa9\r\nReferer: http://r/\"x\"\r\n" + C + b"\r\n",
 b"\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03" + bytes(range(32)) + b"\r\n\r\n",
 b"GET http://www.example.com/absolute?x=y HTTP/1.1\r\nHost: www.example.com\r\n" + C + b"\r\n",
 b"BREW /pot HTTP/1.1\r\nHost: www.example.com\r\n" + C + b"\r\n",
 b"GET /nohttp\r\n",
 b"garbage line\r\n\r\n",
 b"OPTIONS * HTTP/1.1\r\nHost: www.example.com\r\n" + C + b"\r\n",
 b"POST /pricing HTTP/1.1\r\nHost: www.example.com\r\nContent-Length: 5\r\nUser-Agent: Mozilla/4.08 [en] (Win98; I ;Nav)\r\n" + C + b"\r\nhello",
 b"GET / HTTP/1.1\r\nHost: other.example.org:18090\r\n" + C + b"\r\n",
 b"GET /ctl\x01\x7f HTTP/1.1\r\nHost: www.example.com\r\n" + C + b"\r\n",
 b"GET / HTTP/2.0\r\nHost: www.example.com\r\n" + C + b"\r\n",
]
for r in reqs:
    raw(r)
s = socket.create_connection(("127.0.0.1", port)); s.close()  # a connection with nothing sent
time.sleep(0.3)
