import socket, sys
s = socket.create_connection(("127.0.0.1", int(sys.argv[1])))
s.sendall(sys.argv[2].encode().decode('unicode_escape').encode('latin-1'))
s.settimeout(3)
try:
    while s.recv(65536): pass
except Exception: pass
