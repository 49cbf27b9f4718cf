from pipeline_svc.chat import main

main()
