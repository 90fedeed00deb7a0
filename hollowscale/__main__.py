from hollowscale.cli import main

main()
