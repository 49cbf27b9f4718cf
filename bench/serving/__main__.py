from bench.serving.run import main

main()
