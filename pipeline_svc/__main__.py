from pipeline_svc.service import main

main()
