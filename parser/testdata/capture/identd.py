import socketserver
class H(socketserver.StreamRequestHandler):
    def handle(self):
        q = self.rfile.readline().decode().strip()
        self.wfile.write((q + " : USERID : UNIX : bob\r\n").encode())
socketserver.TCPServer.allow_reuse_address = True
socketserver.TCPServer(("127.0.0.1", 113), H).serve_forever()
