"""The wire: proto <-> domain conversions and the status <-> error mapping, shared by the server and its clients
(the CLI, the chat). Nothing here serves or calls anything."""
