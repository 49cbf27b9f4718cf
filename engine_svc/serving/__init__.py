"""The service side: the step loop (in a thread or a child process) behind one engine interface, the engine
built from flags, and the gRPC servicer that streams its outputs."""
