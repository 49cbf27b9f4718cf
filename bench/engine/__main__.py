from bench.engine.run import main

main()
