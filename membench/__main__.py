from membench.cli import main

main()
