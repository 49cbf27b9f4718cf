"""SGLang's own server tests against our stack: a stand-in `sglang` package (the test helpers they import) whose
`popen_launch_server` starts the whole stack (serve.py) under the model name the test asks for; suite.py runs them."""
