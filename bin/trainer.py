def run():
    print("x")
